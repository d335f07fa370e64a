"""Fine-tuning, calibration and evaluation of the cross-encoders the service ships."""
