"""Loading a vision-language model: any ``AutoModelForImageTextToText`` checkpoint and its
processor (:mod:`~uirl_agents.loading.pretrained`), 8/4-bit weights
(:mod:`~uirl_agents.loading.quantization`), and its parts by module name, LoRA's targets
among them (:mod:`~uirl_agents.loading.parts`)."""
