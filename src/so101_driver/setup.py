from setuptools import find_packages, setup

PACKAGE = "so101_driver"

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
    description="Feetech STS3215 bus client, LeRobot calibration and the SO-101 driver and leader nodes.",
    license="Apache-2.0",
    extras_require={"test": ["pytest"]},
    entry_points={
        "console_scripts": [
            'driver = so101_driver.driver_node:main',
            'leader = so101_driver.leader_node:main'
        ],
    },
)
