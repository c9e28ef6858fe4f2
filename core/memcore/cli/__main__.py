"""``python -m memcore.cli``: the same as the ``memcore`` console script."""

from . import main

if __name__ == "__main__":
    main(prog_name="memcore")
