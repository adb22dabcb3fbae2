"""What every app's HTTP side shares: pagination, serializer pieces, body limit, front doors, 503s."""
