"""uirl inside other people's trainers: TRL's ``GRPOTrainer`` (:mod:`.trl`) and the
chat templates that make VL checkpoints usable there (:mod:`.chat_templates`)."""
