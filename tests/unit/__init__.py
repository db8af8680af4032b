"""Unit tests on fake host trees and fakes at the agent's own boundaries (no root, no threads left)."""
