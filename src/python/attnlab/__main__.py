"""`python3 -m attnlab survey MODEL TEXTS [--scheduler tcp://HOST:8786] ...`: the survey of
attnlab.survey from a shell, on a Dask cluster when a scheduler is named (docs/survey.md)."""
import argparse
import json
import sys


# The survey's own options, from its description (the one `attnlab model survey` and
# attnlab.survey read): every Python field that attnlab.survey takes as a keyword, with the
# description's name, type and help (left out, attnlab.survey's default). The shard and its
# partial sums are a worker's, not a shell's.
_PYTHON_TYPES = {"count": int, "number": float, "text": str, "choice": str}


def _described_options(parser, operation: str, function) -> None:
    import inspect

    import attnlab
    takes = inspect.signature(function).parameters
    for f in attnlab._OPERATIONS[operation]["fields"]:
        keyword = f["name"] in takes and takes[f["name"]].kind == inspect.Parameter.KEYWORD_ONLY
        if "python" not in f["faces"] or not keyword:
            continue
        flag = "--" + f["name"].replace("_", "-")
        text = f["help"] + (f" ({f['unit']})" if f["unit"] else "")
        if f["kind"] == "flag":
            parser.add_argument(flag, action="store_true", help=text)
        elif f["kind"] in _PYTHON_TYPES:
            parser.add_argument(flag, type=_PYTHON_TYPES[f["kind"]], help=text)


def main(argv=None) -> int:
    import attnlab
    parser = argparse.ArgumentParser(prog="python3 -m attnlab", description="attnlab from Python's side")
    commands = parser.add_subparsers(dest="command", required=True)
    p = commands.add_parser("survey", help="what every head does across a corpus (docs/survey.md)")
    p.add_argument("model", help="a model folder, a .gguf file or ollama:NAME, at the same path on every worker")
    p.add_argument("texts", help="a file: a document a line, or JSON Lines of {\"text\"} or {\"ids\"}")
    p.add_argument("--scheduler", help="a Dask scheduler's address, e.g. tcp://10.0.0.5:8786 (default: this machine)")
    _described_options(p, "model survey", attnlab.survey)
    p.add_argument("--json", action="store_true", help="print the survey as JSON")
    args = parser.parse_args(argv)
    options = {k: v for k, v in vars(args).items() if k not in ("command", "model", "texts", "scheduler", "json")}

    client = None
    if args.scheduler:
        try:
            from dask.distributed import Client
        except ImportError:
            print("attnlab survey: --scheduler needs Dask's distributed package (apt-get install python3-distributed)",
                  file=sys.stderr)
            return 2
        client = Client(args.scheduler)
    try:
        result = attnlab.survey(args.model, args.texts, client=client, **options)
    except ValueError as e:
        print(f"attnlab survey: {e}", file=sys.stderr)
        return 2
    finally:
        if client is not None:
            client.close()
    if args.json:
        print(json.dumps(dict(result)))
        return 0
    print(f"{result['documents']} documents, {result['windows']} windows, {result['tokens']} tokens")
    print(f"{'head':>6} {'previous':>9} {'self':>7} {'sink':>7} {'induction':>9} {'entropy':>8} {'distance':>9}")
    show = lambda x, digits: "–" if x is None else f"{x:.{digits}f}"  # noqa: E731
    for h in result["heads"]:
        print(f"{h['head']:>6} {show(h['previous_token'], 3):>9} {show(h['self'], 3):>7} {show(h['sink'], 3):>7} "
              f"{show(h['induction'], 3):>9} {show(h['entropy'], 2):>8} {show(h['distance_mean'], 1):>9}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
