"""HTA-compatible views of the GPU timeline (docs/hta-compatibility.md): temporal breakdown,
comm/comp overlap, idle time by cause, kernel breakdown, queue length, launch statistics."""
