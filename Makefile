# The two commands of the README. Each bootstraps .venv by itself.
.PHONY: run test gpu-test lint

run:   ## set up, fetch the default model, open the desktop app on the bundled example
	scripts/run.sh

test:  ## set up and run the whole test suite (what CI runs)
	scripts/test.sh

gpu-test:  ## on a machine with an NVIDIA GPU and torch: the gpu tests and the CUDA benchmarks
	scripts/gpu_tests.sh

lint:
	.venv/bin/ruff check .
