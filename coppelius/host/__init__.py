"""The native host runtime: C sources (this folder) and the zig build that compiles them (build.py)."""
