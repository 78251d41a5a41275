"""Settings of the three services, typed in one place and read one way.

Each service's settings are a msgspec Struct (:mod:`.collector`, :mod:`.analyzer`,
:mod:`.extender`) whose fields carry their type, bounds and one line of help; :mod:`.loader`
reads them for every service the same way: defaults < YAML file < environment < flags, keys in
camelCase (nested where the settings are), ``MCO_<SERVICE>_<KEY>`` in the environment,
``--<key>`` on the command line, old keys read with a warning naming the new one, and every
problem in one message of lines ``SOURCE: key: what is wrong``.
"""
