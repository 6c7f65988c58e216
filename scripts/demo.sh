#!/usr/bin/env bash
# The README's first command: installs what is missing, builds and installs the
# extension, then tells the refund story against a throwaway cluster that
# demo/refund-story.sh starts and removes itself (--keep leaves it running).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh
exec bash demo/refund-story.sh "$@"
