"""``python -m uirl_gym.runtimes.kubernetes cleanup``: delete the pods of crashed runs."""

import sys

from uirl_gym.runtimes.kubernetes.pods import cleanup_main

if __name__ == "__main__":
    sys.exit(cleanup_main())
