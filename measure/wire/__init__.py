"""serve's protocol on the wire: messages, constants, authentication, the control client."""
