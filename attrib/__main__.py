from attrib.cli import app

app(prog_name="attrib")
