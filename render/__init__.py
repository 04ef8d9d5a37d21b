"""Avatar rigs: AvatarParams in, RGBA + motion vectors out."""
