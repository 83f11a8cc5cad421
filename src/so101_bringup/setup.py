from setuptools import find_packages, setup

PACKAGE = "so101_bringup"

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
    description="The so101 command line, in-process composition of the SO-101 graph, demo and benchmarks.",
    license="Apache-2.0",
    extras_require={"test": ["pytest"]},
    entry_points={
        "console_scripts": [
            'so101 = so101_bringup.cli:main',
            'motion_player = so101_bringup.motion_player_node:main'
        ],
    },
)
