from setuptools import find_packages, setup

PACKAGE = "so101_testing"

setup(
    name=PACKAGE,
    version="0.1.0",
    packages=find_packages(exclude=["test"]),
    data_files=[
        ("share/ament_index/resource_index/packages", ["resource/" + PACKAGE]),
        ("share/" + PACKAGE, ["package.xml"]),
    ],
    install_requires=["setuptools"],
    zip_safe=False,
    description="Test helpers shared by the workspace: private loopback DDS environment, node processes, waits.",
    license="Apache-2.0",
    extras_require={"test": ["pytest"]},
    entry_points={
        "pytest11": ["so101_testing = so101_testing.pytest_plugin"],
        "console_scripts": [

        ],
    },
)
