import sys

from pipelines.cli import main

if __name__ == "__main__":
    sys.exit(main())
