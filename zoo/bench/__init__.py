"""The bench layer: checking steps against their reference and timing them (the main job, ``zoo run``)."""
