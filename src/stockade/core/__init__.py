"""What every layer of stockade uses: the error root and exit codes, where stockade keeps its
files, and the interface every sandbox backend implements. Standard library only, and cheap to
import: `stockade run` loads it before every command."""
