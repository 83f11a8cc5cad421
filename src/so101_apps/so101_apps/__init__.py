"""The so101 command line and the application flows built on the workspace's packages."""
