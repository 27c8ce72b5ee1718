"""What users ask of the model: predict, sweep, calibrate, validate, compare, explain, tune."""
