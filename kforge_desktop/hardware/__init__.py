"""What the machine is: device facts for prompts, floors and the session record."""

from .facts import DeviceFacts, device_facts, software_record

__all__ = ["DeviceFacts", "device_facts", "software_record"]
