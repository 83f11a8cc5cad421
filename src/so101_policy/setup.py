from setuptools import find_packages, setup

PACKAGE = "so101_policy"

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
    description="Learned-policy inference node (LeRobot pretrained directories, TorchScript, ONNX).",
    license="Apache-2.0",
    extras_require={"test": ["pytest"]},
    entry_points={
        "console_scripts": [
            'policy = so101_policy.policy_node:main',
            'motion_player = so101_policy.motion_player_node:main'
        ],
    },
)
