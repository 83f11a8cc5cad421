from setuptools import find_packages, setup

PACKAGE = "so101_feetech"

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
    description="Feetech STS3215 protocol, control table, LeRobot servo settings and calibration format "
                "(shared by the SO-101 driver and the virtual SO-101; no ROS).",
    license="Apache-2.0",
    extras_require={"test": ["pytest"]},
    entry_points={"console_scripts": []},
)
