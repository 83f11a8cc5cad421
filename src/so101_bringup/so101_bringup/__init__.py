"""The SO-101 graphs as data, their launch files and in-process composition, and the installed config/, launch/ and models/."""
