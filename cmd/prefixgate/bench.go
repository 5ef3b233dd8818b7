package main

// runBench is replaced by the real command when its issue lands.
var runBench = pending("bench", "issue 9", "Send load to an OpenAI-compatible endpoint and report latency.")
