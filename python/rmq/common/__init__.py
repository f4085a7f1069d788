"""Shared protocol model: request/response codes, message model, configuration."""
