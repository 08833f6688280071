"""``python -m fedpca.deployment certs|site-key|local``: the same as ``fedpca deploy ...``."""

import sys

from fedpca.cli import main

if __name__ == "__main__":
    sys.exit(main(["deploy", *sys.argv[1:]]))
