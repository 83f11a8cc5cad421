import os

from setuptools import find_packages, setup

PACKAGE = "so101_bringup"
# The workspace's top-level launch/, config/ and models/ folders are installed with this package into
# share/so101_bringup/ (found with get_package_share_directory / FindPackageShare). setup.py runs in
# this folder under colcon and pip alike, so they are reached relative to it.
WORKSPACE = os.path.relpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
SHARED = ("launch", "config", "models")


def _share_files(folder: str) -> list[tuple[str, list[str]]]:
    """(install dir, files) for every sub-folder of ``folder`` (symlinked folders are followed)."""
    root = os.path.join(WORKSPACE, folder)
    entries = []
    for current, _, names in os.walk(root, followlinks=True):
        files = sorted(os.path.join(current, n) for n in names if not n.startswith(".") and not n.endswith(".pyc"))
        if files:
            entries.append((os.path.join("share", PACKAGE, folder, os.path.relpath(current, root)).rstrip("/."), files))
    return entries


setup(
    name=PACKAGE,
    version="0.1.0",
    packages=find_packages(exclude=["test"]),
    data_files=[
        ("share/ament_index/resource_index/packages", ["resource/" + PACKAGE]),
        ("share/" + PACKAGE, ["package.xml"]),
        *[entry for folder in SHARED for entry in _share_files(folder)],
    ],
    install_requires=["setuptools"],
    zip_safe=False,
    description="The SO-101 graphs (launch files and in-process composition) and their installed "
                "configuration, launch files and models.",
    license="Apache-2.0",
    extras_require={"test": ["pytest"]},
    entry_points={"console_scripts": []},
)
