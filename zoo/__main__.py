import sys

from zoo.cli import main

if __name__ == "__main__":  # not when a worker process (zoo run's parallel checks) imports this module
    sys.exit(main())
