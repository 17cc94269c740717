#!/usr/bin/env bash
# The trainer checks that need a GPU (docs/training.md, "On GPUs"): run on a machine
# with CUDA, paste the two reports into docs/benchmarks.md.
#
#   bash scripts/gpu_check.sh [OUT_DIR]
#
# 1. One process, bf16: GRPO rollouts with HF generate (KV cache, bf16 kernels) and one
#    update; prints the rollout/trainer old-logprob mismatch (train/logprob_mismatch_*)
#    that the trainer-side old logprobs make harmless.
# 2. Two processes, bf16 (two GPUs; on one GPU the second check runs on CPU and says
#    so): GRPO iterations, then the largest weight difference between the processes
#    after the model is built and after training (must be 0).
# 3. With two GPUs: the same under the shipped FSDP config (NCCL), full fine-tuning.
# 4. With bitsandbytes (the quant extra): 8-bit and 4-bit loading on the GPU
#    (scripts/check_quant.py: only the language model quantized, logits close to full
#    precision, generation), then one QLoRA iteration of each trainer on a 4-bit base.
# The tiny random model is built on the fly: nothing is downloaded.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
OUT=${1:-runs/gpu_check}
rm -rf "$OUT"
mkdir -p "$OUT"

if ! "$PYTHON" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)"; then
  echo "gpu_check: no CUDA device visible to torch; nothing to check here" >&2
  exit 1
fi
GPUS=$("$PYTHON" -c "import torch; print(torch.cuda.device_count())")
"$PYTHON" -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.get_device_name(0))"

COMMON=(--config scripts/configs/tiny_learn.yaml --model.dtype bfloat16 --iterations 2
  --eval.episodes 0 --logging.progress false --logging.report_to '[]')

echo "== 1 process, bf16: rollout + update =="
"$PYTHON" scripts/check_ranks.py --trainer grpo --output-dir "$OUT/one" "${COMMON[@]}" \
  --rollout.episodes_per_iteration 8

echo "== 2 processes, bf16 =="
if [ "$GPUS" -ge 2 ]; then
  "$PYTHON" -m torch.distributed.run --standalone --nproc_per_node 2 scripts/check_ranks.py \
    --trainer grpo --output-dir "$OUT/two" "${COMMON[@]}" --rollout.episodes_per_iteration 8
else
  echo "only $GPUS GPU: the 2-process check runs on CPU (gloo) instead"
  CUDA_VISIBLE_DEVICES="" "$PYTHON" -m torch.distributed.run --standalone --nproc_per_node 2 \
    scripts/check_ranks.py --trainer grpo --output-dir "$OUT/two" "${COMMON[@]}" \
    --rollout.episodes_per_iteration 8
fi
if [ "$GPUS" -ge 2 ]; then
  echo "== 2 processes, FSDP, full fine-tuning, bf16 =="
  "$PYTHON" -m accelerate.commands.launch --config_file scripts/configs/accelerate/fsdp.yaml \
    --num_processes 2 scripts/check_ranks.py --trainer grpo --output-dir "$OUT/fsdp" \
    "${COMMON[@]}" --rollout.episodes_per_iteration 8 --model.lora_rank 0 --optim.learning_rate 1e-5
fi
echo "== 8-bit and 4-bit weights (bitsandbytes), QLoRA =="
if "$PYTHON" -c "import bitsandbytes" 2>/dev/null; then
  "$PYTHON" scripts/check_quant.py --out "$OUT/quant"
  for TRAINER in rs grpo; do
    "$PYTHON" "scripts/train_$TRAINER.py" --output-dir "$OUT/qlora_$TRAINER" "${COMMON[@]}" \
      --iterations 1 --rollout.episodes_per_iteration 8 --model.load_in_4bit true
  done
else
  echo "bitsandbytes is not installed (pip install -e '.[quant]'): quantization not checked"
fi
echo "reports: $OUT/one/rank_check.json $OUT/two/rank_check.json (and $OUT/fsdp with 2 GPUs)," \
  "$OUT/quant/quant_check.json"
