"""cerebras_appliance.utils: small helpers of the client library."""
