"""`pip install --no-build-isolation .`: the Python module (docs/python.md), built by CMake.

Debian 12 has setuptools but no scikit-build, so this is a plain setuptools build whose one
extension is made by CMake: it configures build/pip (or reuses it), builds the _attnlab
target and copies the package CMake assembled (build/pip/python/attnlab) into the wheel.
Nothing is downloaded; CMake, a C++20 compiler, python3-dev, pybind11-dev and attnlab's
other build dependencies must be installed (scripts/setup.sh installs them).
"""
import pathlib
import re
import shutil
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = pathlib.Path(__file__).resolve().parent
# The version is written once, in CMakeLists.txt's project().
VERSION = re.search(r"project\(attnlab VERSION ([0-9.]+)", (ROOT / "CMakeLists.txt").read_text()).group(1)


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        build = ROOT / "build" / "pip"
        subprocess.run(["cmake", "-S", str(ROOT), "-B", str(build), "-DCMAKE_BUILD_TYPE=Release",
                        f"-DPython3_EXECUTABLE={sys.executable}", "-DATTNLAB_BUILD_TESTS=OFF",
                        "-DATTNLAB_PAGE_ENGINE=OFF", "-DATTNLAB_UNITY_BUILD=ON"], check=True)
        subprocess.run(["cmake", "--build", str(build), "--target", "_attnlab", "-j2"], check=True)
        target = pathlib.Path(self.get_ext_fullpath(ext.name)).parent
        package = build / "python" / "attnlab"
        shutil.copytree(package, target, dirs_exist_ok=True)


setup(
    name="attnlab",
    version=VERSION,
    description="attention, step by step: attnlab's engine, scenarios and models as NumPy arrays",
    packages=[],
    ext_modules=[Extension("attnlab._attnlab", sources=[])],
    cmdclass={"build_ext": CMakeBuild},
    install_requires=["numpy"],
    python_requires=">=3.9",
)
