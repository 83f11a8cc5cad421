from glob import glob

from setuptools import find_packages, setup

PACKAGE = "so101_description"
# Description files: shipped inside the Python package (found with importlib.resources, see paths.py)
# and copied under share/so101_description for get_package_share_directory and package:// URIs.
RESOURCE_DIRS = ("urdf", "mjcf", "meshes", "rviz")

setup(
    name=PACKAGE,
    version="0.1.0",
    packages=find_packages(exclude=["test"]),
    package_data={PACKAGE: [f"{d}/*" for d in RESOURCE_DIRS]},
    data_files=[
        ("share/ament_index/resource_index/packages", ["resource/" + PACKAGE]),
        ("share/" + PACKAGE, ["package.xml"]),
        *[(f"share/{PACKAGE}/{d}", sorted(glob(f"{PACKAGE}/{d}/*"))) for d in RESOURCE_DIRS],
    ],
    install_requires=["setuptools"],
    zip_safe=False,
    description="SO-101 URDF, MJCF, meshes and RViz configuration (following the joint spec of so101_common).",
    license="Apache-2.0",
    extras_require={"test": ["pytest"]},
    entry_points={
        "console_scripts": [],
    },
)
