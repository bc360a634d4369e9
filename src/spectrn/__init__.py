"""spectrn: does speculative decoding make your LLM workload on AWS Trainium faster and cheaper?"""

__version__ = "0.1.0"
