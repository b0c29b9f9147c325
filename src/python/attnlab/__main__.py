"""`python3 -m attnlab survey MODEL TEXTS [--scheduler tcp://HOST:8786] ...`: the survey of
attnlab.survey from a shell, on a Dask cluster when a scheduler is named (docs/survey.md)."""
import argparse
import json
import sys


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m attnlab", description="attnlab from Python's side")
    commands = parser.add_subparsers(dest="command", required=True)
    p = commands.add_parser("survey", help="what every head does across a corpus (docs/survey.md)")
    p.add_argument("model", help="a model folder, a .gguf file or ollama:NAME, at the same path on every worker")
    p.add_argument("texts", help="a file: a document a line, or JSON Lines of {\"text\"} or {\"ids\"}")
    p.add_argument("--scheduler", help="a Dask scheduler's address, e.g. tcp://10.0.0.5:8786 (default: this machine)")
    p.add_argument("--shards", type=int, help="shards of the corpus (default: 1 here, 4 a worker on a cluster)")
    p.add_argument("--max-tokens", type=int, help="windows of at most N tokens (default 512 or the model's positions)")
    p.add_argument("--skip-bad-lines", action="store_true", help="leave out lines that are not documents")
    p.add_argument("--json", action="store_true", help="print the survey as JSON")
    args = parser.parse_args(argv)

    import attnlab
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
        result = attnlab.survey(args.model, args.texts, client=client, shards=args.shards, max_tokens=args.max_tokens,
                                skip_bad_lines=args.skip_bad_lines)
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
