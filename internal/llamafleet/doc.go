// Package llamafleet holds the end-to-end tests that put prefixgate in front
// of a real llama.cpp fleet: several llama-server processes, each with one
// slot, one thread and a prompt cache in RAM, serving a tiny random-weight
// llama model; the embedding tests run replicas with --embeddings serving a
// smaller model that tinymodel.py writes with a pooling type.
//
// build.sh builds llama-server from the llama.cpp source that the
// llama-cpp-python source distribution vendors and a Python environment from
// requirements.lock, both into a cache directory outside the work tree;
// tinymodel.py writes the model (made once per script content and cached
// beside the build). `make test` runs build.sh and passes the paths in
// LLAMAFLEET_SERVER, LLAMAFLEET_PYTHON and LLAMAFLEET_CACHE; without them the
// tests skip, and with them anything missing fails the tests.
//
// The tests compare prefixgate with per-document affinity (the ideal, by
// sending each document straight to one replica) and with a cache-blind
// balancer (prefixgate --policy random) on the same traffic, and assert on
// ratios measured in the same run.
package llamafleet
