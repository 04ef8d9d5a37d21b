"""Audio in: decoding, features, lip-sync and motion, producing AvatarParams."""
