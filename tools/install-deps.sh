#!/usr/bin/env bash
# install-deps.sh installs the Debian/Ubuntu packages named in $PKGS that are
# missing (idempotent); $WHY says what they are for when apt-get is absent.
# Used by the Makefile's deps and test-deps targets.
set -euo pipefail
# cmd_of names the command a package provides, for packages whose command
# may come from elsewhere (Node.js from NodeSource or nvm, a Chromium build).
cmd_of() {
	case "$1" in
	glslc | npm | chromium) echo "$1" ;;
	nodejs) echo node ;;
	esac
}
missing=""
for p in $PKGS; do
	cmd=$(cmd_of "$p")
	if [ "$p" = python3-jinja2 ]; then
		# any python3 on PATH that imports jinja2 (a pyenv or venv one too)
		python3 -c 'import jinja2' >/dev/null 2>&1 || missing="$missing $p"
	elif [ -n "$cmd" ]; then
		command -v "$cmd" >/dev/null 2>&1 || missing="$missing $p"
	elif command -v dpkg-query >/dev/null 2>&1; then
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
	fi
done
if [ -z "$missing" ]; then
	echo "deps: all present ($PKGS)"
	exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
	echo "deps: install these packages (or your system's equivalents):$missing"
	echo "  $WHY"
	exit 1
fi
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO=sudo
echo "deps: installing$missing"
$SUDO apt-get update -qq
# shellcheck disable=SC2086
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing
