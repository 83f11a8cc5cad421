from setuptools import find_packages, setup

PACKAGE = "so101_recorder"

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
    description="Episode recorder: raw rosbag2 (MCAP) recording of SO-101 topics with metadata.",
    license="Apache-2.0",
    extras_require={"test": ["pytest"]},
    entry_points={
        "console_scripts": [
            'recorder = so101_recorder.recorder_node:main'
        ],
    },
)
