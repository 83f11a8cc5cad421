from setuptools import find_packages, setup

PACKAGE = "so101_sim2real"

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
    description="Sim replay (Isaac Sim bridge, MuJoCo), paired real/sim datasets, SAGE I/O and gap reports.",
    license="Apache-2.0",
    extras_require={"test": ["pytest"]},
    entry_points={
        "console_scripts": [
            'replay = so101_sim2real.replay_node:main',
            'mujoco_bridge = so101_sim2real.mujoco_bridge_node:main',
            'twin = so101_sim2real.twin_node:main'
        ],
    },
)
