"""placeholder"""


class MiniWobExpert:
    def __init__(self, subdomain: str, **options):
        self.subdomain = subdomain
