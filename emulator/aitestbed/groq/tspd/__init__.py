"""The tspd daemon that owns a GroqNode's eight GroqCards: state, server (wire), client."""
