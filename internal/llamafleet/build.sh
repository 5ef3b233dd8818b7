#!/usr/bin/env bash
# Builds llama.cpp's llama-server (CPU only) from the llama.cpp source that
# the llama-cpp-python source distribution vendors, and a Python environment
# with the pinned packages the llama.cpp fleet tests use (gguf to write the
# tiny model, the OpenAI SDK). Everything lands in a cache directory outside
# the work tree, keyed by version and lock contents, so later runs reuse it.
#
# Prints three lines for the Makefile to export:
#   LLAMAFLEET_SERVER=<path of llama-server>
#   LLAMAFLEET_PYTHON=<path of the venv's python>
#   LLAMAFLEET_CACHE=<the cache directory, where the tests keep the model>
set -euo pipefail

LLAMA_CPP_PYTHON_VERSION=0.3.36
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cache="${PREFIXGATE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/prefixgate}"
mkdir -p "$cache"
log() { echo "llamafleet: $*" >&2; }

# --- Python environment (gguf, numpy, openai), keyed by the lock's hash ----
lock="$here/requirements.lock"
lockhash="$(sha256sum "$lock" | cut -c1-16)"
pyenv="$cache/pyenv-$lockhash"
if [ ! -x "$pyenv/bin/python" ] || [ ! -f "$pyenv/.installed" ]; then
	log "creating $pyenv"
	rm -rf "$pyenv"
	python3 -m venv "$pyenv"
	"$pyenv/bin/python" -m pip install --quiet --no-deps -r "$lock" >&2
	"$pyenv/bin/python" -m pip check >&2
	touch "$pyenv/.installed"
fi

# --- llama-server -----------------------------------------------------------
dir="$cache/llama.cpp-$LLAMA_CPP_PYTHON_VERSION"
server="$dir/bin/llama-server"
if [ -x "$server" ] && "$server" --version >/dev/null 2>&1; then
	log "cached $server"
else
	start=$SECONDS
	rm -rf "$dir.tmp"
	mkdir -p "$dir.tmp/dl"
	log "fetching llama-cpp-python $LLAMA_CPP_PYTHON_VERSION source distribution"
	# --no-build-isolation with no build backend installed would fail metadata
	# preparation, so pip prepares it in isolation; only the tarball is used.
	"$pyenv/bin/python" -m pip download --quiet --no-deps --no-binary :all: \
		"llama-cpp-python==$LLAMA_CPP_PYTHON_VERSION" -d "$dir.tmp/dl" >&2
	tar -xzf "$dir.tmp/dl/llama_cpp_python-$LLAMA_CPP_PYTHON_VERSION.tar.gz" -C "$dir.tmp" \
		"llama_cpp_python-$LLAMA_CPP_PYTHON_VERSION/vendor/llama.cpp"
	src="$dir.tmp/llama_cpp_python-$LLAMA_CPP_PYTHON_VERSION/vendor/llama.cpp"

	cmake_bin=cmake
	if ! command -v cmake >/dev/null 2>&1; then
		log "no cmake on PATH: installing cmake 4.4.4 into the tests venv"
		"$pyenv/bin/python" -m pip install --quiet "cmake==4.4.4" >&2
		cmake_bin="$pyenv/bin/cmake"
	fi
	# CPU only; no HTTPS, no web UI (the prebuilt UI would be downloaded from
	# outside the registries); static so the binary moves with its directory.
	"$cmake_bin" -S "$src" -B "$dir.tmp/build" -DCMAKE_BUILD_TYPE=Release \
		-DBUILD_SHARED_LIBS=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_CURL=OFF \
		-DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF \
		-DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_APP=OFF \
		-DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_TOOLS=ON -DGGML_OPENMP=OFF >&2
	"$cmake_bin" --build "$dir.tmp/build" --target llama-server -j "${LLAMAFLEET_JOBS:-2}" >&2
	mkdir -p "$dir.tmp/out/bin"
	cp "$dir.tmp/build/bin/llama-server" "$dir.tmp/out/bin/"
	"$dir.tmp/out/bin/llama-server" --version >&2
	echo "$LLAMA_CPP_PYTHON_VERSION built in $((SECONDS - start)) s" >"$dir.tmp/out/BUILD"
	rm -rf "$dir"
	mv "$dir.tmp/out" "$dir"
	rm -rf "$dir.tmp"
	log "built $server in $((SECONDS - start)) s"
fi

echo "LLAMAFLEET_SERVER=$server"
echo "LLAMAFLEET_PYTHON=$pyenv/bin/python"
echo "LLAMAFLEET_CACHE=$cache"
