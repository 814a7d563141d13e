#!/usr/bin/env bash
# Ready this checkout for a lent GPU's device tool, and back.
#
#   bash campaign/device_tree.sh slim      # before the calls: results/ stays behind, commit.manifest says what goes
#   bash campaign/device_tree.sh restore   # after them: the index as HEAD has it, no manifest
#
# Why: the device tool copies the working tree's tracked files and its untracked files that git does not ignore, 64 MiB
# at most, and the tracked files passed that on 2026-11-28 (117 MB, most of it results/, which a one-shot does not
# read). `slim`, on a clean checkout, writes commit.manifest (HEAD, then `git ls-tree -r HEAD` without results/: the
# files that are sent, which scripts/gpu_oneshot.sh checks there before anything trains), takes results/ out of the
# index and ignores it in .git/info/exclude (a marked pair of lines), so that it is not sent; its files never leave the disk.
# `restore` puts results/ back into the index from HEAD, removes the marked lines and the manifest (a manifest of an
# older HEAD would stop a later one-shot here). Meanwhile a campaign lane cannot commit a run that finishes (git
# refuses to add an ignored path): its files wait in results/campaign/ for its next collect, so restore soon after.
set -euo pipefail
cd "$(dirname "$0")/.."
MARK="# campaign/device_tree.sh slim: results/ stays behind (restore removes this line and the next)"
exclude=$(git rev-parse --git-path info/exclude)

case "${1:-}" in
  slim)
    if grep -qxF "$MARK" "$exclude" 2>/dev/null; then
      echo "device_tree: already slim (run restore first to slim again)" >&2
      exit 1
    fi
    if [ -n "$(git status --porcelain --untracked-files=no)" ]; then
      echo "device_tree: the checkout has uncommitted changes (git status): commit them first, so that" \
        "commit.manifest names the code that is sent" >&2
      exit 1
    fi
    { git rev-parse HEAD && git ls-tree -r HEAD | grep -v $'\tresults/'; } > commit.manifest.tmp
    mv commit.manifest.tmp commit.manifest
    git ls-files -z -- results | git update-index --force-remove -z --stdin
    mkdir -p "$(dirname "$exclude")"
    printf '%s\n/results/\n' "$MARK" >> "$exclude"
    sent=$( { git ls-files -z; git ls-files -z --others --exclude-standard; } | du -cb --files0-from=- 2>/dev/null |
      tail -n 1 | cut -f1)
    echo "device_tree: slim at $(git rev-parse --short=12 HEAD): results/ stays behind; $((sent / 1048576)) MiB of" \
      "tracked and untracked files go (what the device tool's carry names comes on top); commit.manifest lists" \
      "$(($(wc -l < commit.manifest) - 1)) files. Run restore after the calls."
    ;;
  restore)
    git reset -q -- results
    if [ -f "$exclude" ]; then
      awk -v mark="$MARK" '$0 == mark { skip = 1; next } skip { skip = 0; next } { print }' "$exclude" > "$exclude.tmp"
      mv "$exclude.tmp" "$exclude"
    fi
    rm -f commit.manifest
    echo "device_tree: restored (results/ tracked again, no commit.manifest)"
    ;;
  *)
    echo "usage: bash campaign/device_tree.sh slim|restore" >&2
    exit 2
    ;;
esac
