"""The broker process: log storage, replica manager, controller, group coordinator, broker service."""
