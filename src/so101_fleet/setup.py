from setuptools import find_packages, setup

PACKAGE = "so101_fleet"

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
    description="Fleet scale on Ray: simulated fleets, bag catalogue, distributed replay/pair/analyse, gap trends, "
                "distributed GapONet training.",
    license="Apache-2.0",
    extras_require={"test": ["pytest"]},
)
