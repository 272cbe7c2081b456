"""Launch geometry and argument marshalling, shared by every backend."""
