from glob import glob

from setuptools import find_packages, setup

PACKAGE = "so101_virtual"

setup(
    name=PACKAGE,
    version="0.1.0",
    packages=find_packages(exclude=["test"]),
    package_data={PACKAGE: ["gap_profiles/*.yaml"]},
    include_package_data=True,
    data_files=[
        ("share/ament_index/resource_index/packages", ["resource/" + PACKAGE]),
        ("share/" + PACKAGE, ["package.xml"]),
        ("share/" + PACKAGE + "/gap_profiles", glob("so101_virtual/gap_profiles/*.yaml")),
    ],
    install_requires=["setuptools"],
    zip_safe=False,
    description="The virtual SO-101: STS3215 protocol served on a pseudo-terminal over a MuJoCo arm with servo firmware, backlash, friction and faults.",
    license="Apache-2.0",
    extras_require={"test": ["pytest"]},
    entry_points={
        "console_scripts": [
            'virtual_bus = so101_virtual.cli:main'
        ],
    },
)
