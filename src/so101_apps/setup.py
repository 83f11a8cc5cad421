from setuptools import find_packages, setup

PACKAGE = "so101_apps"

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
    description="The so101 command line and the application flows: demo, recorded motion sessions, run-motion, "
                "compensator training, gap-profile fitting, the preflight checklist and benchmarks.",
    license="Apache-2.0",
    extras_require={"test": ["pytest"]},
    entry_points={
        "console_scripts": [
            'so101 = so101_apps.cli:main',
            'web_view = so101_apps.web_view_node:main',
        ],
    },
)
